package groups

import "github.com/twmb/franz-go/pkg/kerr"

// The Kafka error codes the coordinator answers with.
var (
	codeInvalidGroupID            = kerr.InvalidGroupID.Code
	codeInvalidSessionTimeout     = kerr.InvalidSessionTimeout.Code
	codeUnknownMemberID           = kerr.UnknownMemberID.Code
	codeMemberIDRequired          = kerr.MemberIDRequired.Code
	codeFencedInstanceID          = kerr.FencedInstanceID.Code
	codeIllegalGeneration         = kerr.IllegalGeneration.Code
	codeRebalanceInProgress       = kerr.RebalanceInProgress.Code
	codeInconsistentGroupProtocol = kerr.InconsistentGroupProtocol.Code
	codeGroupMaxSizeReached       = kerr.GroupMaxSizeReached.Code
	codeCoordinatorNotAvailable   = kerr.CoordinatorNotAvailable.Code
	codeCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress.Code
	codeUnknownServerError        = kerr.UnknownServerError.Code
	codeOffsetMetadataTooLarge    = kerr.OffsetMetadataTooLarge.Code
	codeGroupIDNotFound           = kerr.GroupIDNotFound.Code
	codeNonEmptyGroup             = kerr.NonEmptyGroup.Code
	codeGroupSubscribedToTopic    = kerr.GroupSubscribedToTopic.Code
	codeKafkaStorageError         = kerr.KafkaStorageError.Code
)
