"""The report's detail sections: every search, noise, every objective, request time, replica shapes, versions."""
