"""Authentication and authorization: SASL/PLAIN sessions and the ACL authorizer."""
