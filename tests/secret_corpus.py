"""A corpus of credentials and of harmless look-alikes, for the guard's corpus tests.

Every credential here must be refused and every look-alike accepted (0 misses, 0
false refusals). The values are made up with the real shapes (prefix, alphabet,
length); none is a live credential. ``DELIBERATE`` lists where the guard accepts a
text the reference runtime (Agentao 0.5.17) refuses, each with its reason.
"""

from __future__ import annotations

import random
import string

_RNG = random.Random(20261203)
_ALNUM = string.ascii_letters + string.digits
_KEY = _ALNUM + "_-"
_HEX = "0123456789abcdef"
_B32 = string.ascii_uppercase + "234567"


def _r(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def _aws_secret() -> str:
    return "aB1" + _r(_ALNUM + "/+", 37)


#: ``(family, text)``: what a user would call a credential.
CREDENTIALS: list[tuple[str, str]] = [
    # --- provider keys with a recognisable prefix
    ("openai_api_key", f"OPENAI_API_KEY is sk-{_r(_KEY, 48)}"),
    ("openai_api_key", f"use sk-proj-{_r(_KEY, 40)} for the batch job"),
    ("anthropic_api_key", f"claude key sk-ant-api03-{_r(_KEY, 60)}"),
    ("anthropic_api_key", f"sk-ant-admin01-{_r(_KEY, 30)}"),
    ("google_api_key", f"maps: AIza{_r(_KEY, 35)}"),
    ("google_oauth_secret", f"client_secret GOCSPX-{_r(_KEY, 28)}"),
    ("google_oauth_secret", f"GOCSPX-{_r(_KEY, 20)}"),
    ("aws_access_key_id", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_access_key_id", f"temporary creds ASIA{_r(_B32, 16)} expire at noon"),
    ("aws_access_key_id", f"(AKIA{_r(_B32, 16)})"),
    ("aws_access_key_id", "AKIA\u200bIOSFODNN7EXAMPLE"),  # split by a zero-width space
    ("aws_access_key_id", "AKIA\u2060IOSF\ufeffODNN7EXAMPLE"),  # word joiner and BOM
    ("aws_secret_access_key", "AWS secret access key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws_secret_access_key", f"aws: id AKIA..., secret {_aws_secret()}"),
    ("aws_secret_access_key", f"the AWS secret is\n{_aws_secret()}"),
    ("github_token", f"ghp_{_r(_ALNUM, 36)}"),
    ("github_token", f"deploy with gho_{_r(_ALNUM, 36)}"),
    ("github_token", f"ghs_{_r(_ALNUM, 40)} for the app"),
    ("github_token", f"github_pat_{_r(_ALNUM + '_', 82)}"),
    ("github_token", f"github_pat_{_r(_ALNUM, 20)}"),
    ("gitlab_token", f"glpat-{_r(_KEY, 20)}"),
    ("gitlab_token", f"CI uses glpat-{_r(_KEY, 26)} to push"),
    ("slack_token", f"xoxb-{_r(string.digits, 12)}-{_r(string.digits, 13)}-{_r(_ALNUM, 24)}"),
    ("slack_token", f"xoxp-{_r(string.digits, 10)}"),
    ("slack_token", f"app token xapp-1-A{_r(_ALNUM, 10)}-{_r(string.digits, 13)}"),
    (
        "slack_webhook",
        f"alerts go to https://hooks.slack.com/services/T{_r(_B32, 8)}/B{_r(_B32, 8)}/"
        f"{_r(_ALNUM, 24)}",
    ),
    ("slack_webhook", f"https://hooks.slack.com/workflows/T0{_r(_B32, 8)}/A0{_r(_ALNUM, 20)}"),
    ("stripe_key", f"sk_live_{_r(_ALNUM, 24)}"),
    ("stripe_key", f"STRIPE sk_test_{_r(_ALNUM, 99)}"),
    ("stripe_key", f"rk_live_{_r(_ALNUM, 24)}"),
    ("stripe_key", f"rk_test_{_r(_ALNUM, 30)}"),
    ("stripe_key", f"webhook signing secret whsec_{_r(_ALNUM, 32)}"),
    ("twilio_key", f"twilio api key SK{_r(_HEX, 32)}"),
    ("twilio_key", f"account AC{_r(_HEX, 32)}"),
    ("sendgrid_key", f"SG.{_r(_KEY, 22)}.{_r(_KEY, 43)}"),
    ("sendgrid_key", f"mail via SG.{_r(_KEY, 22)}.{_r(_KEY, 43)} please"),
    ("npm_token", f"//registry.npmjs.org/:_authToken npm_{_r(_ALNUM, 36)}"),
    ("npm_token", f"npm_{_r(_ALNUM, 36)}"),
    ("pypi_token", f"pypi-AgEIcHlwaS5vcmc{_r(_KEY, 150)}"),
    ("pypi_token", f"twine upload with pypi-{_r(_KEY, 40)}"),
    ("vault_token", f"VAULT hvs.{_r(_KEY, 90)}"),
    ("vault_token", f"hvb.{_r(_KEY, 30)}"),
    ("digitalocean_token", f"dop_v1_{_r(_HEX, 64)}"),
    ("digitalocean_token", f"refresh dor_v1_{_r(_HEX, 64)}"),
    ("shopify_token", f"shpat_{_r(_HEX, 32)}"),
    ("shopify_token", f"app secret shpss_{_r(_HEX, 32)}"),
    ("mailgun_key", f"mailgun key-{_r(_HEX, 32)}"),
    ("azure_key", f"AccountName=prod;AccountKey={_r(_ALNUM + '+/', 86)}==;Endpoint"),
    ("azure_key", f"Endpoint=sb://x.servicebus.windows.net/;SharedAccessKey={_r(_ALNUM, 44)}"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFU"),
    ("jwt", f"cookie=eyJ{_r(_KEY, 20)}.eyJ{_r(_KEY, 40)}.{_r(_KEY, 43)}"),
    # --- key material
    ("private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA..."),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----"),
    ("private_key", "-----BEGIN EC PRIVATE KEY-----"),
    ("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
    ("private_key", '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQ..."}'),
    ("pem_key_block", f"-----BEGIN PUBLIC KEY-----\n{_r(_ALNUM, 64)}\n-----END PUBLIC KEY-----"),
    (
        "pem_key_block",
        f"-----BEGIN SSH2 ENCRYPTED KEY-----\n{_r(_ALNUM, 40)}\n-----END SSH2 ENCRYPTED KEY-----",
    ),
    # --- HTTP credentials
    ("bearer_token", f"curl -H 'Authorization: Bearer {_r(_KEY, 40)}'"),
    ("bearer_token", f"bearer\n{_r(_KEY + '.', 40)}"),
    ("authorization_header", f"Authorization: Basic {_r(_ALNUM, 28)}="),
    ("authorization_header", f"authorization = token {_r(_HEX, 40)}"),
    ("url_password", "db at https://admin:S3cretPw@db.example.com/app"),
    ("url_password", "postgres://app:hunter2@10.0.0.5:5432/prod"),
    ("url_password", "redis://:p4ssw0rd@cache:6379/0"),
    ("url_password", "amqp://guest:guest@rabbit.internal//"),
    ("url_password", "git clone https://oauth2:x9Y8z7W6@gitlab.example.com/group/repo.git"),
    ("oauth_code", "redirected to /callback?code=4%2F0AX4XfWhQ1234567890"),
    ("oauth_code", "https://app.example.com/cb?state=abc&code=SplxlOBeZQQYbYS6WxSbIA"),
    ("oauth_code", '{"code": "SplxlOBeZQQYbYS6WxSbIA", "state": "xyz"}'),
    # --- assignments and sentences
    ("credential_assignment", "password=hunter2hunter2"),
    ("credential_assignment", "DB_PASSWORD=correct-horse-battery"),
    ("credential_assignment", "password=\nS3cr3t-P4ssw0rd"),
    ("credential_assignment", "password:\n  'Tr0ub4dor&3x'"),
    ("credential_assignment", "export GITHUB_TOKEN=abc123def456ghi"),
    ("credential_assignment", "api_key: 0123456789abcdef0123"),
    ("credential_assignment", "X-API-KEY: 8f14e45fceea167a5a36dedd4bea2543"),
    ("credential_assignment", '{"client_secret": "7c4a8d09ca3762af61e59520943dc264"}'),
    ("credential_assignment", "SECRET_KEY = 'django-insecure-abcdefgh12345'"),
    ("aws_secret_access_key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("credential_assignment", "AWS_SECRET_ACCESS_KEY=abcdefgh12345678"),
    ("credential_assignment", "access_token=ya29.a0AfH6SMBx1234567890"),
    ("credential_assignment", '"refresh_token": "1//0gFDSa9876543210abcdef"'),
    ("credential_assignment", "id_token: eyJraWQiOiIxMjM0NTY3ODkw"),
    ("credential_assignment", "code_verifier=dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
    ("credential_assignment", '"private_key_id": "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0"'),
    ("credential_assignment", "--password=hunter2hunter2"),
    ("credential_assignment", "passphrase: correct-horse-battery"),
    ("credential_assignment", "MYSQL_ROOT_PASSWORD: 'r00t-pw-2024'"),
    ("credential_assignment", "client-secret=4f1b2c3d4e5f6a7b"),
    ("url_password", "mongodb+srv://svc:Zx81Qw92@cluster0.mongodb.net/app"),
    ("credential_assignment", "token := abcdef123456"),
    ("credential_assignment", "ADMIN_PWD=Adm1n!Adm1n"),
    ("credential_assignment", "password=$ecretP4ss"),  # a "$" that is no variable
    ("credential_assignment", "password='$R@1e$H^1^5'"),
    ("password_phrase", "my password is hunter2"),
    ("password_phrase", "Our passphrase was Tr0ub4dor&3"),
    ("password_phrase", "fyi: my wifi password is s3cretW1fi"),
    ("password_phrase", "the admin password is P@ssw0rd!"),
    ("password_phrase", "your passcode is 839204"),
]

#: Texts a user would not call a credential: they must be stored.
LOOK_ALIKES: list[str] = [
    # placeholders and references to where a secret lives
    "token: <redacted>",
    "password=${DB_PASSWORD}",
    "password: ${DB_PASSWORD}",
    "export GITHUB_TOKEN=$GITHUB_TOKEN",
    "api_key = {{ vault_api_key }}",
    "password: ********",
    "password=xxxxxxxx",
    "secret: [REDACTED]",
    "token=<your-token-here>",
    "https://user:${PASSWORD}@db.example.com",
    "postgres://app:****@db/prod",
    "SECRET_KEY=%(secret)s",
    # words and shapes that only resemble a key
    "constant ASIAPACIFICSALES2024",
    "AKIA" + "IOSFODNN7EXAMP",
    "the AKIDIOSFODNN7EXAMPLE prefix is not AWS",
    "region ap-southeast-1 and us-east-1",
    "commit 3f2a9c1b7e4d5a6b8c9d0e1f2a3b4c5d6e7f8a9b",
    "git sha 9fceb02d0ae598e95dc970b74767f19372d61af8 of the release",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "request id 550e8400-e29b-41d4-a716-446655440000 failed",
    "md5 d41d8cd98f00b204e9800998ecf8427e of the empty file",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "task-management-and-planning-system",
    "risk-assessment-for-the-whole-project-plan",
    "sk-" + "a" * 19,
    "the sk-learn package is spelled scikit-learn",
    "ghp_" + "a" * 35,
    "xoxb-123456789",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    "-----BEGIN PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "BEGIN RSA PRIVATE KEY",
    "key-value store with a key-ordering guarantee",
    "the monkey-patched module",
    "pk_live_ keys are publishable and may appear in the browser",
    "SKU SK-1234 is out of stock",
    "ACME AC/DC tribute band",
    "SG. stands for Singapore",
    "npm_config_registry points at the mirror",
    "pypi-server runs on port 8080",
    "hvs. is the prefix of Vault service tokens",
    "dop_v1_ tokens are DigitalOcean's",
    "shpat_ means Shopify access token",
    "glpat- is the GitLab token prefix",
    "GOCSPX- marks a Google client secret",
    "whsec_ is the Stripe webhook secret prefix",
    "the AccountKey setting comes from Key Vault",
    "AccountKey=<storage-key>",
    "the hooks.slack.com/services endpoint is configured in the ops repo",
    "aws region eu-west-1, account alias prod-main",
    "AWS docs: https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials.html",
    "aws s3 cp ./build s3://my-bucket/releases/2024-05-01 --recursive",
    "ThisIsAVeryLongIdentifierNameForTesting1 is a class name",
    # URLs without a password
    "postgres://postgres@127.0.0.1:5432/memoryapp",
    "ssh git@github.com:org/repo.git",
    "https://user@example.com/path",
    "http://localhost:8080/api@v2",
    "mailto:ops@example.com",
    "https://example.com/a:b@c",
    "see https://example.com/login?next=/home&code=",
    "https://example.com/?code=short",
    "error code=500 returned",
    '{"code": 404, "message": "not found"}',
    '{"code": "E42"}',
    # prose about credentials
    "Remember to rotate the password every month",
    "the password policy requires 12 characters",
    "the password is rotated monthly",
    "my password is stored in the team vault",
    "our passphrase was changed yesterday",
    "your password is 12 characters long",
    "Password policy: minimum 12 characters, rotated quarterly",
    "use bearer tokens for auth",
    "Send a Bearer token in the header",
    "Authorization: Basic",
    "Authorization is handled by the gateway, see docs/auth.md",
    "The API key lives in the secrets manager, never in the repo",
    "Secrets are injected by the CI runner; tokens expire after 1 hour",
    "Ask the user before resetting a password or revoking a token",
    "the token bucket algorithm limits requests per second",
    "Our tokenizer splits on whitespace; tokens longer than 20 chars are dropped",
    "max_tokens: 4096",
    "num_tokens=123456789",
    "password: at least 12 characters",
    "mypassword=hunter2hunter2",
    "csrftoken=abcdefghijk",
    "api key: see the vault",
    'password: "hunter2"',
    "token='abc def ghi'",
    "password=hunter2",
    "token: abc",
    "the secret sauce is the retry loop",
    "secret santa is on Friday",
    "Use OAuth: the access token is refreshed by the SDK",
    "refresh tokens last 30 days",
    "code_verifier length must be 43 to 128 characters",
    "private_key_id identifies the key in the service account file",
    "keep the private key in the HSM",
    "User prefers skim-reading: short-answers-with-bullet-points-first",
    "Card 4111 1111 1111 1111 and SSN 078-05-1120 are test data",
    "deploy to ASIA-PACIFIC region first",
    "AKIA is the prefix of long-term AWS access key ids",
    "cost center AC-42 pays for the cluster",
]

#: Look-alikes the reference refuses and this guard stores, and why.
DELIBERATE: dict[str, str] = {
    "token: <redacted>": "a placeholder: the value names no credential",
    "password=${DB_PASSWORD}": "a placeholder: the value names no credential",
    "password: ${DB_PASSWORD}": "a placeholder: the value names no credential",
    "password: ********": "a mask",
    "password=xxxxxxxx": "a mask",
    "secret: [REDACTED]": "a redaction marker",
    "token=<your-token-here>": "a placeholder",
    "constant ASIAPACIFICSALES2024": "AWS key ids are base32: a 0, 1, 8 or 9 never occurs",
}
