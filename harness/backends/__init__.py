"""The backends: where a cluster's nodes run and how the fault vocabulary is carried out there.

Each module implements `vocab.backend.Backend` for one kind of host (`sim`, `netns`, `docker`, `ssh`);
the fault kinds and their parameter types are `vocab.faults.kinds`.
"""
