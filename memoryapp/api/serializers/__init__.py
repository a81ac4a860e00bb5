"""Input and output serializers of the API, one module per resource.

Field names follow docs/behaviour.md §13.
"""
