"""Scripted answers the admin client tests give from their fake servers."""

from __future__ import annotations

import uuid

from node.protocol import admin as M
from node.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID(int=7)


def created(request: M.CreateTopicsRequest, code: int = ErrorCode.NONE) -> M.CreateTopicsResponse:
    return M.CreateTopicsResponse(
        tuple(M.CreatableTopicResult(t.name, TOPIC_ID, code, None, 3, 3) for t in request.topics)
    )


def altered(request, code: int = ErrorCode.NONE):
    return M.IncrementalAlterConfigsResponse(
        tuple(M.AlterConfigsResourceResponse(code, None, r.resource_type, r.resource_name) for r in request.resources)
    )


def cluster_answer(controller_id: int = 1) -> M.DescribeClusterResponse:
    return M.DescribeClusterResponse(
        ErrorCode.NONE,
        None,
        "c1",
        controller_id,
        (
            M.DescribeClusterBroker(5, "127.0.0.5", 9092, None, False, 40),
            M.DescribeClusterBroker(4, "h", 1, "r1", True, 12),
        ),
        99,
    )
