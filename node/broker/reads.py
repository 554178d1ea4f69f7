"""Reads a broker answers from its own metadata image (not linearizable: each answer carries the
metadata offset it reflects), authorized as the controller authorizes them, so that for one image
offset a broker and a controller give the same answer."""

from __future__ import annotations

from dataclasses import replace

from node.bugs import NO_BUGS, Bugs
from node.metadata import describe
from node.metadata.describe import Authorized, ConfigDefaults
from node.process.ports import ProcessPort, RequestContext
from node.protocol.acls import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    DescribeAclsRequest,
    DescribeAclsResponse,
    ResourceType,
)
from node.protocol.admin import DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest, MetadataRequest
from node.protocol.errors import ErrorCode
from node.security.authorizer import Authorizer


class ReadHandler:
    def __init__(
        self,
        port: ProcessPort,
        authorizer: Authorizer | None,
        config_defaults: ConfigDefaults | None,
        bugs: Bugs = NO_BUGS,
    ) -> None:
        self._port = port
        self._authorizer = authorizer
        self._defaults = config_defaults
        self._bugs = bugs

    def answer(self, ctx: RequestContext, request: object) -> object | None:
        """The answer to a read request; None when `request` is not one."""
        response = self._answer(ctx, request)
        if "broker-read-offset-not-applied" in self._bugs and hasattr(response, "metadata_offset"):
            # KAFKA-13836: the end of the fetched log, not what the image has applied
            response = replace(response, metadata_offset=self._port.next_append_offset() - 1)  # type: ignore[type-var]
        return response

    def _answer(self, ctx: RequestContext, request: object) -> object | None:
        image = self._port.image
        authorized = self._authorized(ctx)
        if isinstance(request, DescribeConfigsRequest):
            return describe.describe_configs(image, request, self._defaults, authorized)
        if isinstance(request, MetadataRequest):
            return describe.metadata(image, request, self._port.leader_id, authorized)
        if isinstance(request, DescribeAclsRequest):
            if not self._may_describe_cluster(authorized):
                return DescribeAclsResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, (), image.last_offset)
            return describe.describe_acls(image, request)
        if isinstance(request, DescribeClusterRequest):
            if not self._may_describe_cluster(authorized):
                return DescribeClusterResponse(
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, metadata_offset=image.last_offset
                )
            return describe.describe_cluster(image, request, self._port.leader_id)
        return None

    def may_cluster_action(self, ctx: RequestContext) -> bool:
        return self._authorizer is None or self._authorizer.cluster_action(self._port.image, ctx)

    def _authorized(self, ctx: RequestContext) -> Authorized | None:
        if self._authorizer is None:
            return None
        authorizer, image = self._authorizer, self._port.image
        return lambda operation, resource_type, name: authorizer.authorize_ctx(
            image, ctx, operation, resource_type, name
        )

    @staticmethod
    def _may_describe_cluster(authorized: Authorized | None) -> bool:
        return authorized is None or authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)


__all__ = ["ReadHandler"]
