"""After an erasure: the vendor purge that makes deleted bytes unrecoverable, and the byte scan.

Every vendor difference of erasure lives here, keyed by ``connection.vendor``
(:func:`.vendors.for_connection`): the per-connection preparation, what to record inside
the DELETE transaction, the purge itself, the structural checks, which files a
byte scan may read, "truncate everything" and backups.
``MEMORYAPP_ERASURE_PURGE_METHOD`` (:func:`memoryapp.conf.erasure_purge_method`)
chooses between rewriting everything and the methods that do not (the
measurements are in bench/ERASURE.md).

- SQLite: ``secure_delete`` on the connection, so the DELETE itself overwrites
  the erased cells and every page it frees with zeros. After the commit and
  outside any transaction: an FTS5 ``optimize`` and a fresh ``ANALYZE`` of
  ``sqlite_stat4`` where present; then ``PRAGMA incremental_vacuum`` gives the
  freed (zeroed) pages back — the first purge of a file converts it to
  ``auto_vacuum=INCREMENTAL`` with one ``VACUUM`` — or, with the ``rewrite``
  method, ``VACUUM`` rewrites the whole file; last ``PRAGMA
  wal_checkpoint(TRUNCATE)``, retried until it reports ``(0, 0, 0)``. A read
  transaction open anywhere keeps the checkpoint busy: then the purge has
  *not* happened and says so.
- PostgreSQL: after the commit, wait while a snapshot or transaction that
  predates the erasure could still see the deleted rows, then rewrite each
  affected table — ``pg_repack`` (brief locks at its start and end; other
  sessions keep reading and writing) or ``VACUUM FULL`` (an ``ACCESS
  EXCLUSIVE`` lock for the whole rewrite) — then ``ANALYZE`` them,
  ``VACUUM FULL pg_statistic`` (superuser only) and ``CHECKPOINT``.

The modules: :mod:`.common` (the outcome, the structural checks, the files to
scan, the interface every vendor implements), :mod:`.sqlite`, :mod:`.postgresql`
with :mod:`.repack` (running ``pg_repack``) and :mod:`.pg_files` (which PostgreSQL files
a byte scan reads), :mod:`.vendors` (the implementation for a connection), :mod:`.scan`
(the byte scan) and :mod:`.sql_scan` (the byte scan through the server's SQL).
"""
