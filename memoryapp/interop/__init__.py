"""Interop with the Agentao runtime: its ``MemoryStore`` protocol on our models, file adoption.

``memoryapp.agentao`` is the import path hosts use (``DjangoMemoryStore``);
``memoryapp.interop.adopt`` brings an Agentao ``memory.db`` into this app's
schema. Nothing here imports ``agentao`` at module level: the app works
without the optional extra installed.
"""
