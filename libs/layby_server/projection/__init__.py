"""The PostgreSQL read models: the pool and migrations, the projector and its views."""
