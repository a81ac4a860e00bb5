"""Agentao interop entry point: ``from memoryapp.agentao import DjangoMemoryStore``.

An Agentao (``pip install 'memoryapp[agentao]'``) ``MemoryManager`` keeps its
memory in this app's database when given these stores::

    from agentao.memory import MemoryManager
    from memoryapp.agentao import DjangoMemoryStore

    mm = MemoryManager(
        project_store=DjangoMemoryStore("acme/web"),
        user_store=DjangoMemoryStore("acme/alice"),
    )

Importing this module needs Django set up (it uses the models) but not
``agentao``; see ``docs/agentao.md``.
"""

from memoryapp.interop.adopt import AdoptionReport, adopt, inspect_layout
from memoryapp.interop.store import (
    DjangoMemoryStore,
    StoreDatabaseError,
    StoreIntegrityError,
    StoreOperationalError,
)

__all__ = [
    "AdoptionReport",
    "DjangoMemoryStore",
    "StoreDatabaseError",
    "StoreIntegrityError",
    "StoreOperationalError",
    "adopt",
    "inspect_layout",
]
