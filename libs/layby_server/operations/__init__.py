"""Running and operating an installation: `layby up`, the embedded servers, backup and restore,
NATS authorization, the image's health check."""
