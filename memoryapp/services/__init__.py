"""The write and read services every entry point calls (docs/design.md, "Layers").

Keyword-only functions that own the change window and the recall index/cache
update of each write, so the facade, the admin, the API, the command line, the
Agentao store and ``Memory.objects`` cannot write a memory, decide a review
item, wipe or export in different ways. Modules by concern: ``slices`` (which
stores a call works on), ``memories`` (upsert, rename, soft delete, restore,
clear, import), ``reads`` (live memories, search, by tag), ``summaries``
(session summaries), ``review`` (queue, approve, reject, purge), ``records``
(the writes of Agentao's store protocol, with its row semantics), ``wipe``
(preview and the soft reset), ``prompt`` (recall and the stable block), ``search``
(the literal substring search, in SQL).
"""
