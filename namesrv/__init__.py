"""shoal.namesrv: the NameServer, a process of its own beside the broker (as in RocketMQ).

`NameServer` (name_server) answers route queries and broker registrations; `RouteInfoManager`
(route_info) holds the routes in memory; `config` reads namesrv.conf. It shares the request
server and TLS listener (`shoal.remoting`) and the plain ACL (`shoal.acl`) with the broker, and
never imports it.
"""
