"""The stand-in community platform: a separate WSGI program that behaves like the real site.

It imports nothing from ``community_api`` or ``adapters``. Start it with
``python -m scripts.sandbox --bind 127.0.0.1:PORT [--seed N]``; build it in-process with
:func:`scripts.sandbox.app.create_app`.
"""
