"""The built-in workloads: plug-ins that register themselves in `vocab.workload.WORKLOADS` when their
module is imported. The harness loads them through `harness.plugins` and knows them only by name."""

from __future__ import annotations


def load_builtin() -> None:
    """Import (and so register) every built-in workload."""
    from workloads import (  # noqa: F401 - register themselves
        config_append,
        config_register,
        etcd_append,
        etcd_register,
        etcd_watch,
        isr_changes,
        kafka_config_append,
        kafka_config_register,
        kafka_observe,
        registrations,
    )
