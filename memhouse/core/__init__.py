"""The ground floor of MemHouse: environment, principals and permissions, tenancy and RLS, errors,
the LLM provider, metering, fields, parsers, the embedded database and the beat schedule. It
imports no other MemHouse floor (.importlinter).
"""
