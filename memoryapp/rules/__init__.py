"""Pure rules: plain Python over plain values, no Django (a test forbids the import).

Validation and key normalisation, classification, secret detection, the write guard, the
crystallizer, the prompt blocks' rendering, retry policy and the wording of counts and receipts.
Everything here can be read, tested and reused without a database.
"""
