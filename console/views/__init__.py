"""Console views for curators and subjects. Sign-in is for humans: only Django users
linked to a human Peer exist, so an agent (API keys only) can never get in.

Every view:

1. requires a signed-in human and builds their Principal with `principal_for_user`, which
   binds the request's transaction (ATOMIC_REQUESTS) to their Account - so PostgreSQL
   row-level security hides every other Account's rows;
2. reads through the governance / knowledge selectors (or console.selectors, which
   applies the same audiences) and writes only through governance services, exactly as
   the REST API does, so authorisation, lifecycle events and audit are identical;
3. renders the page, or only its fragment for an HTMX request (`is_partial`), from the
   same templates; a mutating POST answers an HTMX request with the updated fragment, the
   queue / question counters out-of-band (hx-swap-oob) and an HX-Trigger event, and a
   plain form post with a redirect and a flash message.

Errors reach people as sentences: ApplicationError messages, and 403 / 404 pages that
say what happened. Another Account's ids simply do not exist (404).
"""
