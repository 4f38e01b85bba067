"""The protocol's one home: request and response codes, headers, body shapes and the spec of every code.

``codes`` (RequestCode, ResponseCode), ``responses`` (the response-code table the error classes
are generated from), ``fields`` (typed ext reads), ``header`` (declarative headers), ``shape``
(body shapes), ``headers/`` (each request's and response's header classes and body shapes) and
``specs`` (one ``RequestSpec`` per request code: headers, body, ACL rule and who serves it).

This package is the bottom layer: it imports nothing from ``remoting``, ``broker``, ``client`` or
the apps, and no third-party package (``scripts/check`` enforces the layers). Nothing is
re-exported here, so importing ``rocketpy.protocol.codes`` loads only that module.
"""
