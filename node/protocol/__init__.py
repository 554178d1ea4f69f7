"""Wire messages of every API kraft-chaos speaks, and the codec that frames them.

`messages` holds the quorum RPCs (KIP-595); `admin` and `acls` the client's admin APIs; `broker_api`
the APIs between nodes (registration, heartbeats, AlterPartition, Envelope, FetchSnapshot); `session`
SASL and ApiVersions. One dataclass per request/response, with Kafka's field names in snake_case.
`errors` holds the error codes; `registry` joins every API with its Kafka API key; `fields` and
`schemas` say how each message is laid out on the wire; `codec` turns messages into length-prefixed
frames and back; `forwarding` packs a client's request into an Envelope and unpacks it.
"""
