/**
 * The admission.k8s.io version the webhook serves: the chart registers it
 * (`admissionReviewVersions: ["v1"]`), the API server sends it, and the webhook answers in kind.
 */
export const ADMISSION_REVIEW_API_VERSION = 'admission.k8s.io/v1';
export const ADMISSION_REVIEW_KIND = 'AdmissionReview';
