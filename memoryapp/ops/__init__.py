"""Operations: health endpoints, Prometheus metrics and collectors, logging, system checks."""
