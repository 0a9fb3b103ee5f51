"""Groups' apps: web applications made from templates, served to whom their scope admits."""
