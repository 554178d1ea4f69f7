"""Wire messages of the metadata quorum and the codec that frames them.

`messages` holds one dataclass per request/response with the KIP's field names (snake_case);
`errors` holds the error codes; `codec` turns messages into length-prefixed frames and back.
"""
