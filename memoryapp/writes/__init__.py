"""The write path of live memories and of the review queue.

``store`` is the one insert-or-update of a memory (with its event and the subject rule),
``bulk`` the fast import over it, ``review_queue`` the crystallizer's proposals on the database.
"""
