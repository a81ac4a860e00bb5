"""The REST API of memoryapp (DRF): an optional Django app, label ``memoryapp_api``.

Add ``"memoryapp.api"`` to ``INSTALLED_APPS`` and include ``memoryapp.api.urls``
under ``/api/``. The core app never imports this package, so it works without DRF.
"""
