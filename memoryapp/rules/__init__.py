"""Pure rules: plain Python over plain values, no Django (a test forbids the import).

Validation and key normalisation, classification, secret detection, the write guard, the
crystallizer, the prompt blocks' rendering, what the LLM tools hand back (the recall hit, the
save tool's replies), retry policy and the wording of counts and receipts.
Everything here can be read, tested and reused without a database.
"""
