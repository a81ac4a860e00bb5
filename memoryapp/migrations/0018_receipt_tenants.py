# Erasure receipts and export records carry the tenant they named (issue #39): the
# tenant-scoped officers see those of their tenants only (compliance/desk_scope.py).
#
# The backfill traces a tenant from what the rows still hold, never from erased text:
#   1. the subject requests linked to a record (their tenant, when every linked request
#      with one agrees);
#   2. a subject request naming the same subject (the same keyed HMAC under the same key);
#   3. an unfinished receipt's sealed request (its subject key or namespace), opened with
#      MEMORYAPP_ERASURE_KEY as the worker opens it.
# A record none of these reaches keeps NULL: only officers without tenant grants see it.

from django.db import migrations, models, router


def _tenant_of(key):
    cut = key.rfind("/")
    return key[: cut + 1] if cut >= 0 else ""


def _from_requests(record, hmacs):
    linked = {t for t in record.subject_requests.values_list("tenant", flat=True) if t}
    if len(linked) == 1:
        return linked.pop()
    if record.subject_hmac:
        found = hmacs.get((record.subject_hmac, record.key_id), set())
        if len(found) == 1:
            return next(iter(found))
    return None


def _from_sealed(receipt):
    from memoryapp.compliance import sealed

    try:
        opened = sealed.unseal(receipt.sealed)
    except Exception:  # no key configured, or a body an older release wrote
        return None
    if not opened:
        return None
    tenants = set()
    for target in opened[0]:
        if target.subject is not None:
            tenants.add(_tenant_of(target.subject))
        elif target.namespace is not None:
            tenants.add(_tenant_of(target.namespace))
        elif target.rows:
            tenants.update(_tenant_of(ns) for pairs in target.rows.values() for ns, _ in pairs)
        else:
            return None
    return tenants.pop() if len(tenants) == 1 else None


def backfill(apps, schema_editor):
    alias = schema_editor.connection.alias
    request_model = apps.get_model("memoryapp", "SubjectRequest")
    receipt_model = apps.get_model("memoryapp", "ErasureReceipt")
    if not (
        router.allow_migrate_model(alias, request_model)
        and router.allow_migrate_model(alias, receipt_model)
    ):
        return  # a database without these tables (the user-scope database)
    hmacs: dict = {}
    for hmac, key_id, tenant in (
        request_model.objects.using(alias)
        .exclude(tenant="")
        .values_list("subject_hmac", "key_id", "tenant")
    ):
        hmacs.setdefault((hmac, key_id), set()).add(tenant)
    receipts = receipt_model.objects.using(alias)
    # Read before any update: no cursor stays open over the rows being written.
    fields = ("pk", "subject_hmac", "key_id", "sealed")
    for receipt in list(receipts.filter(tenant__isnull=True).only(*fields)):
        tenant = _from_requests(receipt, hmacs)
        if tenant is None and receipt.sealed:
            tenant = _from_sealed(receipt)
        if tenant is not None:
            receipts.filter(pk=receipt.pk).update(tenant=tenant)
    exports = apps.get_model("memoryapp", "ExportRecord").objects.using(alias)
    for record in list(exports.filter(tenant__isnull=True).only("pk", "subject_hmac", "key_id")):
        tenant = _from_requests(record, hmacs)
        if tenant is not None:
            exports.filter(pk=record.pk).update(tenant=tenant)


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0016_embeddings"),
    ]

    operations = [
        migrations.AddField(
            model_name="erasurereceipt",
            name="tenant",
            field=models.CharField(blank=True, max_length=255, null=True),
        ),
        migrations.AddField(
            model_name="exportrecord",
            name="tenant",
            field=models.CharField(blank=True, max_length=255, null=True),
        ),
        migrations.AddIndex(
            model_name="erasurereceipt",
            index=models.Index(fields=["tenant", "created_at"], name="ix_receipts_tenant"),
        ),
        migrations.AddIndex(
            model_name="exportrecord",
            index=models.Index(fields=["tenant", "created_at"], name="ix_exports_tenant"),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
