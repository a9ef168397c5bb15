package main

// Strimzi's KafkaTopic and KafkaUser: the fields and enums of their CRDs' openAPIV3Schema (spec only; status is the
// operator's), written out as Go structs so that the strict decode catches an unknown field, and check() the enums,
// minimums and required fields the schema declares. KafkaUser follows its kafka.strimzi.io/v1 CRD, KafkaTopic its
// v1beta2 one (the same spec fields). Both versions are accepted with these structs: v1 dropped fields that v1beta2
// had deprecated, and the structs have only what both versions have.

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const strimziGroupVersion = "kafka.strimzi.io/v1 or v1beta2"

var strimziKinds = map[schema.GroupVersionKind]func() any{
	{Group: "kafka.strimzi.io", Version: "v1", Kind: "KafkaTopic"}:      func() any { return &KafkaTopic{} },
	{Group: "kafka.strimzi.io", Version: "v1", Kind: "KafkaUser"}:       func() any { return &KafkaUser{} },
	{Group: "kafka.strimzi.io", Version: "v1beta2", Kind: "KafkaTopic"}: func() any { return &KafkaTopic{} },
	{Group: "kafka.strimzi.io", Version: "v1beta2", Kind: "KafkaUser"}:  func() any { return &KafkaUser{} },
}

// strimziObject is a Strimzi resource that checks what its CRD's schema declares beyond field names and types.
type strimziObject interface {
	check() field.ErrorList
}

type KafkaTopic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Partitions *int64         `json:"partitions,omitempty"`
		Replicas   *int64         `json:"replicas,omitempty"`
		Config     map[string]any `json:"config,omitempty"` // x-kubernetes-preserve-unknown-fields
		TopicName  string         `json:"topicName,omitempty"`
	} `json:"spec"`
}

type KafkaUser struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              *struct {
		UserName       string `json:"userName,omitempty"`
		Authentication *struct {
			Type     string `json:"type"`
			Password *struct {
				ValueFrom *struct {
					SecretKeyRef *struct {
						Key      string `json:"key,omitempty"`
						Name     string `json:"name,omitempty"`
						Optional *bool  `json:"optional,omitempty"`
					} `json:"secretKeyRef,omitempty"`
				} `json:"valueFrom"`
			} `json:"password,omitempty"`
		} `json:"authentication,omitempty"`
		Authorization *struct {
			Type string    `json:"type"`
			ACLs []aclRule `json:"acls"`
		} `json:"authorization,omitempty"`
		Quotas *struct {
			ProducerByteRate       *int64   `json:"producerByteRate,omitempty"`
			ConsumerByteRate       *int64   `json:"consumerByteRate,omitempty"`
			RequestPercentage      *int64   `json:"requestPercentage,omitempty"`
			ControllerMutationRate *float64 `json:"controllerMutationRate,omitempty"`
		} `json:"quotas,omitempty"`
		Template *struct {
			Secret *struct {
				Metadata *struct {
					Labels      map[string]string `json:"labels,omitempty"`
					Annotations map[string]string `json:"annotations,omitempty"`
				} `json:"metadata,omitempty"`
			} `json:"secret,omitempty"`
		} `json:"template,omitempty"`
	} `json:"spec"`
}

type aclRule struct {
	Type     string `json:"type,omitempty"`
	Resource *struct {
		Type        string `json:"type"`
		Name        string `json:"name,omitempty"`
		PatternType string `json:"patternType,omitempty"`
	} `json:"resource"`
	Host       string   `json:"host,omitempty"`
	Operations []string `json:"operations"`
}

func (t *KafkaTopic) check() field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if t.Spec.Partitions != nil && *t.Spec.Partitions < 1 {
		errs = append(errs, field.Invalid(spec.Child("partitions"), *t.Spec.Partitions, "must be at least 1"))
	}
	if t.Spec.Replicas != nil && (*t.Spec.Replicas < 1 || *t.Spec.Replicas > 32767) {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *t.Spec.Replicas, "must be 1 to 32767"))
	}
	return errs
}

func (u *KafkaUser) check() field.ErrorList {
	spec := field.NewPath("spec")
	if u.Spec == nil {
		return field.ErrorList{field.Required(spec, "")}
	}
	var errs field.ErrorList
	if a := u.Spec.Authentication; a != nil {
		errs = append(errs, oneOf(spec.Child("authentication", "type"), a.Type, "tls", "tls-external", "scram-sha-512")...)
		if a.Password != nil && a.Password.ValueFrom == nil {
			errs = append(errs, field.Required(spec.Child("authentication", "password", "valueFrom"), ""))
		}
	}
	if a := u.Spec.Authorization; a != nil {
		errs = append(errs, oneOf(spec.Child("authorization", "type"), a.Type, "simple")...)
		if a.ACLs == nil {
			errs = append(errs, field.Required(spec.Child("authorization", "acls"), ""))
		}
		for i, rule := range a.ACLs {
			at := spec.Child("authorization", "acls").Index(i)
			if rule.Type != "" {
				errs = append(errs, oneOf(at.Child("type"), rule.Type, "allow", "deny")...)
			}
			if rule.Resource == nil {
				errs = append(errs, field.Required(at.Child("resource"), ""))
			} else {
				errs = append(errs, oneOf(at.Child("resource", "type"), rule.Resource.Type, "topic", "group", "cluster", "transactionalId")...)
				if rule.Resource.PatternType != "" {
					errs = append(errs, oneOf(at.Child("resource", "patternType"), rule.Resource.PatternType, "literal", "prefix")...)
				}
			}
			if rule.Operations == nil {
				errs = append(errs, field.Required(at.Child("operations"), ""))
			}
			for j, operation := range rule.Operations {
				errs = append(errs, oneOf(at.Child("operations").Index(j), operation, "Read", "Write", "Create", "Delete",
					"Alter", "Describe", "ClusterAction", "AlterConfigs", "DescribeConfigs", "IdempotentWrite", "All")...)
			}
		}
	}
	if q := u.Spec.Quotas; q != nil {
		for name, value := range map[string]*int64{"producerByteRate": q.ProducerByteRate, "consumerByteRate": q.ConsumerByteRate, "requestPercentage": q.RequestPercentage} {
			if value != nil && *value < 0 {
				errs = append(errs, field.Invalid(spec.Child("quotas", name), *value, "must be at least 0"))
			}
		}
	}
	return errs
}

func oneOf(path *field.Path, value string, allowed ...string) field.ErrorList {
	if slices.Contains(allowed, value) {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, value, allowed)}
}
