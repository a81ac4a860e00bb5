"""Settings of the runnable project, read from the environment (django-environ)."""

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
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "memoryapp",
    "project",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
        # pages (erasure, SPEC §9); busy_timeout waits for a lock instead of
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
        db.setdefault("TEST", {}).setdefault("NAME", str(VAR_DIR / "test_db.sqlite3"))
    return db


DATABASES = {
    "default": _database(env("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")),
    # The throw-away in-memory store of MemoryManager.ephemeral() and sub-agent
    # managers (memoryapp.ephemeral); declared so that test cases can list it.
    "memoryapp_ephemeral": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": "file:memoryapp_ephemeral?mode=memory&cache=shared",
        "TEST": {"NAME": "file:memoryapp_ephemeral_test?mode=memory&cache=shared"},
    },
}
DATABASE_ROUTERS = ["memoryapp.routers.EphemeralRouter"]

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

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "memoryapp": {"handlers": ["console"], "level": env("MEMORYAPP_LOG_LEVEL", default="INFO")}
    },
}

# --- memoryapp settings (documented in memoryapp/conf.py) -------------------
MEMORYAPP_GUARD = env("MEMORYAPP_GUARD", default="memoryapp.guards.MemoryGuard")
