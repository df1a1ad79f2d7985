"""Built-in diagnosis rules, one module per bottleneck family; importing this package
registers them (`membound.analysis.findings.RULES`)."""

from membound.analysis.rules import (  # noqa: F401
    communication,
    copies,
    data_parallel,
    host_bound,
    host_sync,
    input_starved,
    launch_bound,
    matmul,
    memory,
)
