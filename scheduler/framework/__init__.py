"""The scheduling framework: its vocabulary (types), PodInfo/NodeInfo, the extension points and
the runtime that runs a profile's plugins."""
