"""An erasure request's target: its shape checked once, its values checked, a :class:`Target` built.

Every interface builds its target here (API, admin, CLI, Python), so each refuses
the same requests with the same words: :func:`check_request_shape` holds the rule
of which fields go together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from memoryapp.compliance.selection import ROW_MODELS, Target
from memoryapp.models import ErasureTarget
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.validation import check_id, check_stored_key

RowsByTable = Mapping[str, Iterable[tuple[str, str]]]
"""Exact rows to erase: table name → ``(namespace, id)`` pairs."""

NON_FIELD = "non_field_errors"


class ErasureRequestError(ValueError):
    """An erasure or export request that names nothing, or names it ambiguously.

    ``field`` names the request field the refusal is about (``non_field_errors``
    when it is about the request as a whole), so an API can answer per field.
    """

    def __init__(self, message: str, field: str = NON_FIELD) -> None:
        super().__init__(message)
        self.field = field


def check_request_shape(
    *,
    subject: str | None = None,
    namespace: str | None = None,
    ids=None,
    everything: bool = False,
    include_authored: bool = False,
) -> None:
    """Refuse a request whose fields do not go together; the one rule for every interface.

    One target: a ``subject``, ``ids``, a ``namespace``, or ``everything``;
    ``namespace`` given with ``subject`` or ``ids`` restricts them to it;
    ``include_authored`` only widens a subject erasure.

    Raises:
        ErasureRequestError: with the field it is about and the API's message.
    """
    if isinstance(subject, str) and not subject.strip():
        raise ErasureRequestError("A subject is a non-empty user key.", "subject")
    given = [v for v in (subject, namespace, ids) if v is not None]
    if everything and given:
        raise ErasureRequestError(
            "`everything` cannot be combined with another target.", "everything"
        )
    if not everything and not given:
        raise ErasureRequestError("Give a subject, a namespace, ids, or everything=true.")
    if subject is not None and ids is not None:
        raise ErasureRequestError("Give either `subject` or `ids`.", "ids")
    if include_authored and subject is None:
        raise ErasureRequestError(
            "`include_authored` applies to a subject erasure.", "include_authored"
        )


def _ids(ids) -> tuple[str, ...]:
    if isinstance(ids, str):
        ids = [ids]
    try:
        values = tuple(dict.fromkeys(check_id(i if isinstance(i, str) else str(i)) for i in ids))
    except TypeError:
        raise ErasureRequestError("ids must be an id or an iterable of ids") from None
    except MemoryValidationError as exc:
        raise ErasureRequestError(str(exc)) from None
    if not values:
        raise ErasureRequestError("ids is empty: name at least one id to erase")
    return values


def stored_text(name: str, value) -> str:
    """A subject or namespace, exactly as stored (values no column can hold are refused)."""
    if not isinstance(value, str):
        raise ErasureRequestError(f"{name} must be a string")
    try:
        value = check_stored_key(value, name)
    except MemoryValidationError as exc:
        raise ErasureRequestError(str(exc)) from None
    if name == "subject" and not value.strip():
        raise ErasureRequestError("subject must be a non-empty user key")
    return value


def _rows(rows: RowsByTable) -> dict[str, tuple[tuple[str, str], ...]]:
    """``rows`` checked: known tables, ``(namespace, id)`` pairs of strings."""
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    try:
        for table, pairs in rows.items():
            if table not in ROW_MODELS:
                raise ErasureRequestError(
                    f"rows: unknown table (expected one of {', '.join(ROW_MODELS)})"
                )
            checked = []
            for namespace, pk in pairs:
                if not isinstance(namespace, str) or not isinstance(pk, str):
                    raise ErasureRequestError("rows must hold (namespace, id) pairs of strings")
                checked.append((namespace, pk))
            out[table] = tuple(dict.fromkeys(checked))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ErasureRequestError):
            raise
        raise ErasureRequestError("rows must map a table to (namespace, id) pairs") from None
    return out


def _within(within) -> tuple[str, ...] | None:
    if within is None:
        return None
    if isinstance(within, str):
        raise ErasureRequestError("within must be a collection of namespaces, not a string")
    return tuple(sorted({stored_text("namespace", ns) for ns in within}))


def _grants(grants) -> tuple[tuple[str, bool], ...] | None:
    if grants is None:
        return None
    if isinstance(grants, str):
        raise ErasureRequestError("grants must be (namespace, is_prefix) pairs, not a string")
    try:
        pairs = [(ns, prefix) for ns, prefix in grants]
    except (TypeError, ValueError):
        raise ErasureRequestError("grants must be (namespace, is_prefix) pairs") from None
    if any(not isinstance(p, bool) for _, p in pairs):
        raise ErasureRequestError("grants must be (namespace, is_prefix) pairs")
    return tuple(sorted({(stored_text("namespace", ns), p) for ns, p in pairs}))


def build_target(
    *,
    subject: str | None = None,
    namespace: str | None = None,
    ids=None,
    everything: bool = False,
    include_authored: bool = False,
    rows: RowsByTable | None = None,
    within: Iterable[str] | None = None,
    grants: Iterable[tuple[str, bool]] | None = None,
) -> Target:
    """Validate an erase/preview/export request and return its :class:`Target`.

    Exactly one of ``subject``, ``ids`` (or ``rows``), ``namespace`` (alone) or
    ``everything`` names what to erase (:func:`check_request_shape`); ``namespace``
    given together with ``subject`` or ``ids`` restricts them to that namespace,
    ``within`` (a collection of namespaces) to those, ``grants`` (``(namespace,
    is_prefix)`` pairs) to the namespaces they cover. An ``ids`` target comes back
    unresolved (no ``rows``): :func:`resolve` finds its rows on the databases it covers.
    """
    named_ids = ids if ids is not None or rows is None else rows
    check_request_shape(
        subject=subject,
        namespace=namespace,
        ids=named_ids,
        everything=everything,
        include_authored=include_authored,
    )
    if everything:
        if within is not None or grants is not None:
            raise ErasureRequestError(
                "`everything` cannot be combined with another target.", "everything"
            )
        return Target(ErasureTarget.EVERYTHING)
    if namespace is not None:
        namespace = stored_text("namespace", namespace)
    scoped, granted = _within(within), _grants(grants)
    if subject is not None:
        return Target(
            ErasureTarget.SUBJECT,
            subject=stored_text("subject", subject),
            namespace=namespace,
            include_authored=bool(include_authored),
            within=scoped,
            grants=granted,
        )
    if named_ids is not None:
        return _ids_target(ids, rows, namespace, scoped, granted)
    if scoped is not None or granted is not None:
        raise ErasureRequestError(
            "within and grants restrict a subject or ids; they name nothing alone"
        )
    return Target(ErasureTarget.NAMESPACE, namespace=namespace)


def _ids_target(ids, rows, namespace, scoped, granted) -> Target:
    """An ids target: unresolved from ``ids``, or exact from ``rows`` (already located)."""
    if rows is None:
        return Target(
            ErasureTarget.IDS, ids=_ids(ids), namespace=namespace, within=scoped, grants=granted
        )
    exact = _rows(rows)
    named = ids if ids is not None else [pk for pairs in exact.values() for _, pk in pairs]
    return Target(
        ErasureTarget.IDS,
        ids=_ids(named),
        namespace=namespace,
        rows=exact,
        within=scoped,
        grants=granted,
    )
