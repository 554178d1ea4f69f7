"""Apache Kafka 4.x in KRaft mode as a system under test (`--sut kafka`): where its jars come from
(`dist`), how the harness asks its quorum who leads (`quorum`), and the adapter (`db`)."""
