"""Studies: longer experiments with their own reports, run from the command line.

``link_study`` (docs/studies/links.md: what crosses a contact and what it does to learning)
and ``ns3_link_check`` (docs/concepts/links.md: the link models against ns-3's 802.11p).
"""
