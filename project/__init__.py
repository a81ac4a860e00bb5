"""The runnable Django project around the memoryapp app."""
