"""Create the first admin account for ``make run`` and print how to log in."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    """Create a superuser once; take ``ADMIN_USERNAME``/``ADMIN_PASSWORD`` from the environment."""

    help = (
        "Create the admin account on first run (ADMIN_USERNAME / ADMIN_PASSWORD from the "
        "environment, else 'admin' with a generated password kept in var/admin-password.txt)."
    )

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        username = os.environ.get("ADMIN_USERNAME") or "admin"
        password = os.environ.get("ADMIN_PASSWORD") or ""
        secret_file = settings.VAR_DIR / "admin-password.txt"
        user = User.objects.filter(username=username).first()
        if user is None:
            if not password:
                password = secrets.token_urlsafe(12)
                settings.VAR_DIR.mkdir(exist_ok=True)
                secret_file.write_text(password + "\n")
                secret_file.chmod(0o600)
            User.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(self.style.SUCCESS(f"Created the admin account {username!r}."))
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
        if not password and secret_file.exists():
            password = secret_file.read_text().strip()
        shown = password or "(the password you set earlier)"
        self.stdout.write(
            f"Log in at http://127.0.0.1:8000/admin/ as {username!r} with password: {shown}"
        )
