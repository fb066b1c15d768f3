"""The write operations every service shares: resolving a question, operating runs, visits of
doors, parks on subjects, the feed, webhooks out."""
