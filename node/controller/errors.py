"""One error code for a whole request, shaped as that request's response.

Most admin responses carry their errors per item (per topic, resource, ACL creation or filter), with
no top-level error code; `node.protocol.refusal.error_response` covers the others.
"""

from __future__ import annotations

from node.protocol.acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from node.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from node.protocol.common import ZERO_UUID
from node.protocol.refusal import error_response


def whole_request_error(request: object, code: int, message: str | None = None) -> object:
    """`request`'s response with `code` for every item it names (or as its top-level error)."""
    match request:
        case CreateTopicsRequest(topics=items):
            return CreateTopicsResponse(tuple(CreatableTopicResult(t.name, ZERO_UUID, code, message) for t in items))
        case DeleteTopicsRequest(topic_names=names):
            return DeleteTopicsResponse(tuple(DeletableTopicResult(n, ZERO_UUID, code, message) for n in names))
        case IncrementalAlterConfigsRequest(resources=items):
            return IncrementalAlterConfigsResponse(
                tuple(AlterConfigsResourceResponse(code, message, r.resource_type, r.resource_name) for r in items)
            )
        case AlterConfigsRequest(resources=items):
            return AlterConfigsResponse(
                tuple(AlterConfigsResourceResponse(code, message, r.resource_type, r.resource_name) for r in items)
            )
        case DescribeConfigsRequest(resources=items):
            return DescribeConfigsResponse(
                tuple(DescribeConfigsResult(code, message, r.resource_type, r.resource_name) for r in items)
            )
        case CreateAclsRequest(creations=items):
            return CreateAclsResponse(tuple(AclCreationResult(code, message) for _ in items))
        case DeleteAclsRequest(filters=items):
            return DeleteAclsResponse(tuple(DeleteAclsFilterResult(code, message) for _ in items))
        case ElectLeadersRequest(topic_partitions=topics):
            # As Kafka's ElectLeadersRequest.getErrorResponse: the top-level code and every partition
            # named with it (none when the request named every partition).
            results = tuple(
                ElectLeadersTopicResult(
                    t.topic, tuple(ElectLeadersPartitionResult(p, code, message) for p in t.partitions)
                )
                for t in topics or ()
            )
            return ElectLeadersResponse(code, results)
    return error_response(request, code)


__all__ = ["whole_request_error"]
