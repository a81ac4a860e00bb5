"""Recall: the pure core (``core/``) and its database side.

``core/`` (no Django) defines what a query matches, how it scores, the index and its bytes.
Here, over the database: ``rows`` reads stored rows as index records; ``cache`` is the
process-wide LRU kept fresh by the slice counters (``change_window``); ``stable_blocks``
caches rendered stable blocks. The literal substring search in SQL is
:mod:`memoryapp.services.search`.
"""
