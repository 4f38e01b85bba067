"""Request processors of the broker: one module per family of request codes.

Each processor is built with the managers it uses (never the controller) and exposes one handler
per code; ``BrokerController.processor_table`` maps the codes to them. A handler decodes a
request's header, makes one manager or store call and builds the response; none touches files or
sockets directly (STYLE rule 1).
"""
