"""Django-free clients of the HTTP API, for agents on other machines.

``MemoryClient`` speaks the facade's method names; ``HttpMemoryStore`` is Agentao's
``MemoryStore`` protocol over the API, one namespace.  Neither imports Django.
"""

from memoryapp.clients.memory import MemoryClient
from memoryapp.clients.store import HttpMemoryStore

__all__ = ["HttpMemoryStore", "MemoryClient"]
