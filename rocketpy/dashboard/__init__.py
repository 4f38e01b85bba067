"""The web dashboard (``rocketpy dashboard -n NAMESRV``): cluster, topics, consumer groups, message
search, dead letters and live charts, served by aiohttp from server-rendered jinja2 pages.

Needs the ``dashboard`` extra (``pip install 'rocketpy[dashboard]'``). Everything it shows or changes
goes through the SDK's ``rocketpy.Admin`` (see docs/design.md, "The dashboard").
"""
