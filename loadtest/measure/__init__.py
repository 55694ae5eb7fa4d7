"""One cell measured, with what surrounds it: servers, Locust, scrapes, telemetry, host probes, floors."""
