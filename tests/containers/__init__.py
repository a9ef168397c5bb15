"""The integration tier on containers of the images built here (make images)."""
