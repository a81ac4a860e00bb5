"""``MemoryManager``: the seed-compatible facade a host (agent runtime) talks to.

The facade is thin: it binds one project namespace and at most one user
namespace (a :class:`~memoryapp.services.slices.Binding`), the database
aliases, the session id, a write counter and the problems of its reads, and
delegates to :mod:`memoryapp.services`. Its methods are grouped by concern:
``core`` (stores, writes, reads, deletes, wipe), ``sessions`` (session
summaries), ``blocks`` (recall and the prompt blocks), ``queue`` (the review
queue), ``problems`` (store problems), ``children`` (sub-agents).
"""

from memoryapp.facade.blocks import EXCERPT_CHARS
from memoryapp.facade.children import ChildManager
from memoryapp.facade.core import MemoryManager
from memoryapp.facade.types import RecallCandidate, WipeResult

# MemoryManager.child() makes ChildManagers, a subclass of it: the package, which
# imports both, hands the class down (docs/design.md, "Layers").
MemoryManager._child_class = ChildManager

__all__ = ["EXCERPT_CHARS", "MemoryManager", "RecallCandidate", "WipeResult"]
