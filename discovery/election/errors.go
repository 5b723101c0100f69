package election

import "errors"

// Sentinel errors; every error the machine returns wraps one of them with
// "election: <operation>: ..." context, so test them with errors.Is.
var (
	// ErrInvalidConfig wraps every Config.Validate failure.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrBadName is returned for an empty node ID or group name, one longer
	// than MaxNameLen, or one holding a NUL byte (NUL separates node and
	// group in the rendezvous hash, so it must not occur in either).
	ErrBadName = errors.New("bad name")
	// ErrUnknownGroup is returned for a group that was not added. Groups may
	// be added at different moments on different nodes, so a message for an
	// unknown group is expected now and then: drop it.
	ErrUnknownGroup = errors.New("unknown group")
	// ErrGroupExists is returned by AddGroup for a group already added.
	ErrGroupExists = errors.New("group already exists")
	// ErrTooManyGroups is returned by AddGroup when Config.MaxGroups is reached.
	ErrTooManyGroups = errors.New("too many groups")
	// ErrUnknownPeer is returned by PeerDown for a node that is not up.
	ErrUnknownPeer = errors.New("unknown peer")
	// ErrTooManyPeers is returned by PeerUp when Config.MaxPeers is reached.
	ErrTooManyPeers = errors.New("too many peers")
	// ErrBadMessage is returned by Step for a message that no correct peer
	// sends: wrong addressee, a rank that does not match the sender and
	// group, a COORDINATOR whose epoch names another leader, an unknown type.
	ErrBadMessage = errors.New("malformed message")
	// ErrBadEpoch is returned for an epoch that no leader can hold: a zero
	// number, no leader, or the largest number (which could not be followed).
	ErrBadEpoch = errors.New("bad epoch")
	// ErrStaleEpoch: the epoch is older than the highest this node has seen
	// for the group. Step returns it for a refused COORDINATOR (counted in
	// Stats.Stale), Fence for a refused request (counted in Stats.Fenced).
	ErrStaleEpoch = errors.New("stale epoch")
	// ErrNotHandingOver is returned by Drained when the group is not handing
	// over at that epoch, e.g. because a newer leader was seen meanwhile. It
	// is harmless: the drain had to happen anyway.
	ErrNotHandingOver = errors.New("not handing over at this epoch")
)
