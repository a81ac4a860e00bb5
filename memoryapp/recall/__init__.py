"""Recall: tokens, the exact scoring, the per-namespace index, its snapshots and cache.

``tokens`` and ``scoring`` define what a query matches and how it scores (docs/behaviour.md §5);
``index`` is the incremental in-memory index that scores exactly as ``scoring`` does; ``rows``
reads stored rows as index records; ``snapshot`` turns an index into bytes for cold workers;
``cache`` is the process-wide LRU kept fresh by the slice counters (``change_window``);
``stable_blocks`` caches rendered stable blocks; ``search`` is the literal substring search in SQL.
"""
