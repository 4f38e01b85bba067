"""Request processors of the broker: one module per family of request codes.

Each processor decodes a request's header, makes one manager or store call and builds the
response; none touches files or sockets directly (STYLE rule 1).
"""
