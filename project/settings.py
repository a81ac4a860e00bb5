"""Settings of the runnable project, read from the environment (django-environ)."""

import datetime as dt
import os
import sys
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["127.0.0.1", "localhost"]),
)
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# A random development key is generated into var/ on first use so that a fresh
# clone runs without configuration; production sets SECRET_KEY explicitly.
SECRET_KEY = env("SECRET_KEY", default=None)
if not SECRET_KEY:
    VAR_DIR.mkdir(exist_ok=True)
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        import secrets

        _key_file.write_text(secrets.token_urlsafe(50))
    SECRET_KEY = _key_file.read_text().strip()

DEBUG = env("DEBUG")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from here, not a CDN
    "axes",  # admin login throttling (see AUTHENTICATION_BACKENDS below)
    "memoryapp",
    "memoryapp.api",
    "project",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files from the app server itself (compressed, hashed names): no web
    # server in front is needed for the admin and the API docs.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "memoryapp.ops.views.ApiMetricsMiddleware",
    # Read-your-writes with read replicas: a request that writes reads the primary, and
    # the same client's next requests wait for a replica to replay that write.
    "memoryapp.db.read_your_writes.ReadYourWritesMiddleware",
    # Last, as django-axes requires: turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"


def _database(url: str) -> dict:
    """Parse a database URL and add the options this app relies on per vendor."""
    db = environ.Env.db_url_config(url)
    if db["ENGINE"] == "django.db.backends.sqlite3":
        options = db.setdefault("OPTIONS", {})
        # WAL lets readers run beside one writer; secure_delete zeroes freed
        # pages (erasure, docs/behaviour.md §9); busy_timeout waits for a lock instead of
        # failing; IMMEDIATE takes the write lock at BEGIN so two upserts never
        # both read "no row" and then collide (the reference's race).
        options.setdefault(
            "init_command",
            "PRAGMA journal_mode=WAL; PRAGMA secure_delete=ON; PRAGMA synchronous=NORMAL;",
        )
        options.setdefault("transaction_mode", "IMMEDIATE")
        options.setdefault("timeout", 30)
        if db["NAME"] and db["NAME"] != ":memory:":
            Path(db["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        # The test database is a file too (not :memory:), so that WAL, triggers
        # across connections and the erasure byte scan behave as in production.
        test_name = str(VAR_DIR / f"test_db{_TEST_SUFFIX}.sqlite3")
        db.setdefault("TEST", {}).setdefault("NAME", test_name)
    elif db["ENGINE"].startswith("django.db.backends.postgresql"):
        # Django's backend, whose per-request health check asks the socket instead
        # of sending SELECT 1 (one round trip less per request; see its docstring).
        db["ENGINE"] = "memoryapp.db.backends.postgresql"
        # Persistent connections (checked before reuse): a new connection per
        # request roughly halved the API's recall throughput in bench/API_RESULTS.md.
        # "?conn_max_age=0" in the URL restores one connection per request.
        db.setdefault("CONN_MAX_AGE", 60)
        db.setdefault("CONN_HEALTH_CHECKS", True)
        db.setdefault("TEST", {}).setdefault("NAME", f"test_{db['NAME']}{_TEST_SUFFIX}")
    return db


# Test runs started side by side (two checkouts, a developer and a helper) must
# not share a test database: each pytest process gets its own.
_TEST_SUFFIX = f"_{os.getpid()}" if "pytest" in sys.modules else ""


DATABASES = {
    "default": _database(env("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")),
    # The throw-away in-memory store of MemoryManager.ephemeral() and sub-agent
    # managers (memoryapp.facade.ephemeral); declared so that test cases can list it.
    "memoryapp_ephemeral": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": "file:memoryapp_ephemeral?mode=memory&cache=shared",
        # No TEST NAME: Django then tests on its own in-memory one for the alias
        # (file:memorydb_memoryapp_ephemeral?mode=memory&cache=shared), one per process,
        # which pytest-django leaves alone under pytest-xdist; a name given here would get
        # the worker's suffix appended to its URI ("cache=shared_gw0": no such cache mode).
    },
}
# DATABASE_REPLICA_URLS: read-only streaming replicas of DATABASE_URL, comma-separated,
# registered as replica_1, replica_2, ...: lag-tolerant reads go there (docs/operations.md).
# In a test run they mirror the test database (no test database is created on a replica).
MEMORYAPP_REPLICA_DATABASES = []
for _number, _url in enumerate(
    (u.strip() for u in env("DATABASE_REPLICA_URLS", default="").split(",") if u.strip()), 1
):
    _replica = _database(_url)
    _replica["TEST"] = {"MIRROR": "default"}
    DATABASES[f"replica_{_number}"] = _replica
    MEMORYAPP_REPLICA_DATABASES.append(f"replica_{_number}")
MEMORYAPP_REPLICA_MAX_LAG = env.float("MEMORYAPP_REPLICA_MAX_LAG", default=5.0)
MEMORYAPP_REPLICA_CHECK_INTERVAL = env.float("MEMORYAPP_REPLICA_CHECK_INTERVAL", default=1.0)
MEMORYAPP_REPLICA_STICKY_SECONDS = env.float("MEMORYAPP_REPLICA_STICKY_SECONDS", default=60.0)
DATABASE_ROUTERS = ["memoryapp.db.routers.EphemeralRouter", "memoryapp.db.routers.ReplicaRouter"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# One date format in the whole admin, Django's pages and the app's (project/formats).
FORMAT_MODULE_PATH = ["project.formats"]

# CACHE_URL=redis://127.0.0.1:6379/0 shares the cache between every worker and
# machine (throttle counts per client, not per worker); default: this process only.
_cache = env.cache_url("CACHE_URL", default="locmemcache://")
for _option in ("key_prefix", "timeout", "version"):  # django-environ leaves these lower-case
    if _option in _cache:
        _cache[_option.upper()] = _cache.pop(_option)
CACHES = {"default": _cache}

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=VAR_DIR / "static")
if "STATIC_ROOT" not in os.environ:
    # The checkout's own var/static, filled by `make serve`'s collectstatic: made here so
    # that WhiteNoise, finding no directory, does not warn at each start of its middleware
    # (`make run`, and every test client: hundreds of identical warnings per test pass).
    # A STATIC_ROOT set by the environment is the deployment's to create.
    Path(STATIC_ROOT).mkdir(parents=True, exist_ok=True)
# STATIC_HASHED=true (set by `make serve`, after its collectstatic): pages name the
# hashed, compressed copies, which WhiteNoise serves with far-future caching. Off
# (development, tests), pages name the plain files, found where they live — a
# manifest left in STATIC_ROOT by an earlier `make serve` must not send `make run`
# after copies it does not serve.
STATIC_HASHED = env.bool("STATIC_HASHED", default=False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if STATIC_HASHED
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Behind HTTPS (HTTPS=true): secure cookies, redirect to https, HSTS. A proxy that
# terminates TLS must send X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER below).
HTTPS = env.bool("HTTPS", default=False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=HTTPS)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=HTTPS)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
BEHIND_PROXY = env.bool("BEHIND_PROXY", default=False)
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Login throttling (django-axes; project/login.py). The first backend refuses a login
# while its account or its address is locked out; ModelBackend checks the password.
# The API's tokens do not go through these backends.
AUTHENTICATION_BACKENDS = [
    "project.login.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# LOGIN_FAILURE_LIMIT failed logins of one account, or from one address, within
# LOGIN_COOLOFF_MINUTES lock that account (or address) out for that long; staff
# lift a lock early in the admin (Access attempts: delete) or with `axes_reset`.
# LOGIN_COOLOFF_MINUTES=0: locked until staff lift it.
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
_cooloff = env.float("LOGIN_COOLOFF_MINUTES", default=15)
AXES_COOLOFF_TIME = dt.timedelta(minutes=_cooloff) if _cooloff > 0 else None
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own, not the pair
AXES_CLIENT_IP_CALLABLE = "project.login.client_address"
# A success does not clear the failures: an attacker holding one account must not
# be able to reset the count of the address they guess other accounts from.
AXES_RESET_ON_SUCCESS = False
# Only failures are kept (username, address, time): no row per successful login.
AXES_DISABLE_ACCESS_LOG = True
# Axes' log lines mask these (logs hold no personal data, docs/compliance.md §10).
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "user_agent"]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memoryapp.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Per-scope rates of memoryapp.api (per user, or per IP when anonymous); an
    # empty value turns a scope's throttling off. "erase" also covers purge,
    # wipe-all and exports. Counters live in the default cache: give several
    # app servers a shared cache (e.g. Redis) for the rates to be global.
    "DEFAULT_THROTTLE_RATES": {
        "write": env("API_THROTTLE_WRITE", default="1200/min") or None,
        "recall": env("API_THROTTLE_RECALL", default="2400/min") or None,
        "erase": env("API_THROTTLE_ERASE", default="60/min") or None,
        # GET of the paginated lists (memories, with ?q= and ?tag=; summaries; review
        # items; events).
        "list": env("API_THROTTLE_LIST", default="1200/min") or None,
    },
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "memoryapp API",
    "DESCRIPTION": (
        "Long-term memory of AI agents: memories, recall, session summaries, the review "
        "queue, erasure and export. Authenticate with `Authorization: Token <key>` (or a "
        "session). A namespace outside the client's grants answers 404. A query parameter "
        "an operation does not list is refused with a 400 naming it (`format=json` aside)."
    ),
    "VERSION": "1.0.0",
    "SCHEMA_PATH_PREFIX": "/api/",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "memoryapp.api.schema.postprocess_erasure_shapes",
        "memoryapp.api.schema.postprocess_review_edit",
    ],
    "ENUM_NAME_OVERRIDES": {
        "ScopeEnum": "memoryapp.models.Scope",
        "MemoryTypeEnum": "memoryapp.models.MemoryType",
        "ReviewStatusEnum": "memoryapp.models.ReviewStatus",
        "SubjectStatusEnum": "memoryapp.models.RequestStatus",
    },
}

# Request bodies larger than this are refused with 413 (the API's largest
# legitimate body is a conversation sent to recall or the crystallizer).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2 * 1024 * 1024)

# LOG_FORMAT=json: one JSON object per line (python-json-logger), for log shippers.
# Nothing logged carries a value (docs/compliance.md §10): the console handler's
# filter redacts query strings and writes an exception as its class and frames,
# without its message. A server error (500) is logged there with that traceback
# (django.request at ERROR), and runserver's request lines (django.server)
# go through the same handler and format; gunicorn's access log through
# project/gunicorn_logging.py.
LOG_FORMAT = env("LOG_FORMAT", default="text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"without_values": {"()": "memoryapp.ops.logs.WithoutValues"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "text",
            "filters": ["without_values"],
        }
    },
    "loggers": {
        "memoryapp": {"handlers": ["console"], "level": env("MEMORYAPP_LOG_LEVEL", default="INFO")},
        # 5xx only (4xx are in the access log); Django's default sends them nowhere
        # with DEBUG off.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}

# --- memoryapp settings (documented in memoryapp/conf.py) -------------------
MEMORYAPP_GUARD = env("MEMORYAPP_GUARD", default="memoryapp.rules.guard.MemoryGuard")
# Per-process cap of the recall indexes (an LRU over namespaces); an index takes
# about 4.7 MiB per 10,000 memories (bench/RESULTS.md: 38 MiB at 100,000).
MEMORYAPP_RECALL_CACHE_BYTES = env.int("MEMORYAPP_RECALL_CACHE_BYTES", default=256 * 1024 * 1024)
# Recall's default ranking, agentao | hybrid | semantic (memoryapp/conf.py checks the name):
# a deployment turns hybrid on without a settings module of its own. semantic needs the
# `semantic` extra (a system check refuses to start without it).
MEMORYAPP_RECALL_RANKING = env("MEMORYAPP_RECALL_RANKING", default="agentao")
# The embedder of the semantic ranking: "wordllama" (the model the extra ships), a model2vec
# or Sentence-Transformers model directory, a dotted path to a callable, or "none".
MEMORYAPP_EMBEDDER = env("MEMORYAPP_EMBEDDER", default="wordllama")
# Persisted recall indexes: a cold worker loads a tenant's index instead of rebuilding it.
MEMORYAPP_RECALL_SNAPSHOTS = env.bool("MEMORYAPP_RECALL_SNAPSHOTS", default=True)
# Erasure receipts and retention (docs/compliance.md). The receipt key defaults
# to one derived from SECRET_KEY; production sets a dedicated, stable key. The
# ledger must live on storage that is not restored with the database.
MEMORYAPP_ERASURE_KEY = env("MEMORYAPP_ERASURE_KEY", default=None)
MEMORYAPP_ERASURE_LEDGER = env("MEMORYAPP_ERASURE_LEDGER", default=None)
MEMORYAPP_ERASURE_PURGE_TIMEOUT = env.float("MEMORYAPP_ERASURE_PURGE_TIMEOUT", default=10.0)
# auto | online | rewrite (memoryapp/conf.py): "rewrite" is the way out of a purge that
# keeps leaving residue, settable here without a settings module of one's own.
MEMORYAPP_ERASURE_PURGE_METHOD = env("MEMORYAPP_ERASURE_PURGE_METHOD", default="auto")
# At most one rewrite of every tenant's rows (whole tables, VACUUM of the file) started
# by erasures per this many seconds, across processes (memoryapp/conf.py).
MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL = env.float(
    "MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL", default=3600.0
)
# Automatic attempts before a receipt "needs attention", the backoff between them, and
# the age past which an unfinished erasure is reported (/healthz, the admin overview).
MEMORYAPP_ERASURE_MAX_ATTEMPTS = env.int("MEMORYAPP_ERASURE_MAX_ATTEMPTS", default=8)
MEMORYAPP_ERASURE_RETRY_DELAY = env.float("MEMORYAPP_ERASURE_RETRY_DELAY", default=5.0)
MEMORYAPP_ERASURE_RETRY_MAX_DELAY = env.float("MEMORYAPP_ERASURE_RETRY_MAX_DELAY", default=600.0)
MEMORYAPP_ERASURE_STALE_AFTER = env.float("MEMORYAPP_ERASURE_STALE_AFTER", default=3600.0)
MEMORYAPP_COPY_REPORT_AFTER = env.float("MEMORYAPP_COPY_REPORT_AFTER", default=3600.0)
MEMORYAPP_COPY_CLAIM_SECONDS = env.float("MEMORYAPP_COPY_CLAIM_SECONDS", default=600.0)
MEMORYAPP_REPLICA_REPLAY_WAIT = env.float("MEMORYAPP_REPLICA_REPLAY_WAIT", default=10.0)
MEMORYAPP_COPY_VERIFIERS = env.list("MEMORYAPP_COPY_VERIFIERS", default=[])
# /metrics answers only "Authorization: Bearer <token>"; unset, it is off (404).
MEMORYAPP_METRICS_TOKEN = env("MEMORYAPP_METRICS_TOKEN", default=None)
# HTTP/admin erasures answer once rows are deleted; `manage.py memory worker` purges.
MEMORYAPP_ERASURE_WORKER = env.bool("MEMORYAPP_ERASURE_WORKER", default=False)
MEMORYAPP_RETENTION_DELETED_MEMORIES_DAYS = env.int(
    "MEMORYAPP_RETENTION_DELETED_MEMORIES_DAYS", default=30
)
MEMORYAPP_RETENTION_REVIEW_ITEMS_DAYS = env.int("MEMORYAPP_RETENTION_REVIEW_ITEMS_DAYS", default=30)
MEMORYAPP_RETENTION_SESSION_SUMMARIES_DAYS = env(
    "MEMORYAPP_RETENTION_SESSION_SUMMARIES_DAYS", default=None
)
