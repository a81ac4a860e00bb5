"""Recall's pure core: what a query matches, how it scores, the index and its bytes.

``tokens`` and ``scoring`` define what a query matches and how it scores (docs/behaviour.md §5);
``postings``, ``index`` and ``pruning`` are the in-memory index that scores exactly as
``scoring`` does; ``hybrid`` and ``semantic`` are the other rankings (``rankings`` names
them all); ``snapshot`` turns an index into bytes for cold workers; ``embedding``,
``vectors`` and ``stemming`` serve ``semantic`` and ``hybrid``. None of them imports
Django (tests/architecture/test_layers.py): workers and clients reuse them without it.
"""
